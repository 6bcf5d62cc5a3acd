"""Graph algorithms on DataFrames: connected components, label propagation, PageRank.

Built once here, on Spark DataFrames, so that they scale with the cluster and every engine
uses the same ones (GraphFrames, the usual library, has no Spark 4 jar this project can
reach). A graph is ``vertices`` with an ``id`` column and ``edges`` with ``src`` and ``dst``
(:mod:`~workloads.graph.edges`); each algorithm returns its frame with the rounds or
iterations it took:

* :func:`connected_components` (:mod:`~workloads.graph.components`): alternating
  large-star and small-star rounds; a component's id is its smallest vertex id;
* :func:`label_propagation` (:mod:`~workloads.graph.communities`): weighted, synchronous,
  ties to the smallest label;
* :func:`pagerank` (:mod:`~workloads.graph.centrality`): networkx's PageRank, dangling
  vertices included.

The package imports only ``lakehouse``: the engines sit above it.
"""

from workloads.graph.centrality import PAGERANK, Ranks, pagerank
from workloads.graph.communities import LABEL, Communities, label_propagation
from workloads.graph.components import COMPONENT, Components, connected_components
from workloads.graph.edges import DST, ID, SRC

__all__ = [
    "COMPONENT",
    "DST",
    "ID",
    "LABEL",
    "PAGERANK",
    "SRC",
    "Communities",
    "Components",
    "Ranks",
    "connected_components",
    "label_propagation",
    "pagerank",
]
