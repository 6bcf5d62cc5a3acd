"""``lakehouse communities``: the community engine over the serving correlations, kept in
``gold.communities`` (:mod:`workloads.communities.build`) and measured against the true rings
(:mod:`workloads.communities.quality`)."""

from workloads.communities.build import CommunityBuild, run_communities

__all__ = ["CommunityBuild", "run_communities"]
