"""Event generation, one day at a time: logins, orders, and each order's settlement,
refund and fraud outcome, drawn from the population's habits.

Each event is handed to the :class:`~workloads.synthetic.planting.Planter` as soon as it is
drawn; nothing of a day is kept once the day is generated.
"""

from __future__ import annotations

import math
import random
from itertools import accumulate
from typing import Final

from workloads.synthetic.feeds import EventIds, Fields, amount_cents_of, cents_text
from workloads.synthetic.planting import Planter
from workloads.synthetic.population import CURRENCIES, MERCHANTS, Person, Population
from workloads.synthetic.timeline import DAY_SECONDS, Calendar, date_of
from workloads.vocabulary import Feed

WEEKDAY_FACTOR: Final = (0.95, 0.97, 1.0, 1.0, 1.05, 1.15, 1.1)
"""Relative activity Monday to Sunday."""

ORDERS_PER_ACTIVITY_DAY: Final = 0.125
LOGINS_PER_ACTIVITY_DAY: Final = 0.3


class EventGenerator:
    """Draws each day's events for a population and parks them through the planter."""

    def __init__(
        self,
        population: Population,
        first_day: int,
        calendar: Calendar,
        ids: EventIds,
        planter: Planter,
    ) -> None:
        self._persons = population.persons
        self._cum_weights = list(accumulate(p.activity for p in self._persons))
        self._total_activity = self._cum_weights[-1]
        self._first_day = first_day
        self._calendar = calendar
        self._ids = ids
        self._planter = planter

    def generate_day(self, day: int, rng: random.Random) -> None:
        """Every event that happens on ``day``: its logins, then its orders."""
        self._logins(day, rng)
        self._orders(day, rng)

    def _daily_count(self, day: int, per_activity: float, rng: random.Random) -> int:
        mean = self._total_activity * per_activity * WEEKDAY_FACTOR[date_of(day).weekday()]
        return max(0, round(rng.gauss(mean, math.sqrt(mean))))

    def _logins(self, day: int, rng: random.Random) -> None:
        count = self._daily_count(day, LOGINS_PER_ACTIVITY_DAY, rng)
        who = rng.choices(self._persons, cum_weights=self._cum_weights, k=count)
        base = day * DAY_SECONDS
        feed = Feed.LOGINS  # looked up once: enum attribute access is slow in a hot loop
        for person in who:
            secs = base + min(DAY_SECONDS - 1, int(rng.triangular(0, DAY_SECONDS, 0.8 * DAY_SECONDS)))
            event_id, _ = self._ids.next_id(feed, day)
            in_ring = person.ring is not None and rng.random() < 0.35
            device = rng.choice(person.ring_devices if in_ring else person.own_devices)
            prefix = person.ring_ip_prefix if in_ring else person.ip_prefix
            success = rng.random() < (0.8 if person.ring else 0.94)
            fields: Fields = (
                ("schema_version", "1", True),
                ("event_id", event_id, True),
                ("event_time", self._calendar.iso(secs), True),
                ("customer_email", rng.choice(person.emails), True),
                ("device_id", device, True),
                ("ip", f"{prefix}.{rng.randrange(1, 255)}", True),
                ("success", "true" if success else "false", False),
                ("revision", "1", False),
            )
            self._planter.deliver(feed, secs, event_id, fields, rng, day)

    def _orders(self, day: int, rng: random.Random) -> None:
        count = self._daily_count(day, ORDERS_PER_ACTIVITY_DAY, rng)
        who = rng.choices(self._persons, cum_weights=self._cum_weights, k=count)
        base = day * DAY_SECONDS
        months_in = (day - self._first_day) / 30.0
        v1_share = max(0.04, 0.3 - 0.05 * months_in)  # the partner migrates to v2 over time
        feed = Feed.ORDERS
        for person in who:
            secs = base + min(DAY_SECONDS - 1, int(rng.triangular(0, DAY_SECONDS, 0.75 * DAY_SECONDS)))
            event_id, seq = self._ids.next_id(feed, day)
            ringed = person.ring is not None
            use_ring = ringed and rng.random() < 0.4
            card = rng.choice(person.ring_cards if use_ring else person.own_cards)
            device = rng.choice(person.ring_devices if ringed and rng.random() < 0.4 else person.own_devices)
            cents = int(math.exp(rng.gauss(3.4, 0.9)) * 100) * (2 if ringed else 1)
            cents = min(500_000, max(100, cents))
            currency = person.home_currency if rng.random() < 0.85 else rng.choice(CURRENCIES)
            if ringed and rng.random() < 0.5:
                merchant = rng.choice(person.ring_merchants)
            else:
                merchant = f"m_{rng.randrange(MERCHANTS):04d}"
            email = rng.choice(person.emails)
            fields = order_fields(
                v1=rng.random() < v1_share,
                event_id=event_id,
                time_text=self._calendar.iso(secs),
                email=email,
                card=card,
                device=device,
                cents=cents,
                currency=currency,
                merchant=merchant,
            )
            final = self._planter.deliver(feed, secs, event_id, fields, rng, day)
            cents = amount_cents_of(final)
            self._followers(person, day, seq, event_id, cents, currency, rng)

    def _followers(
        self,
        person: Person,
        day: int,
        seq: int,
        order_id: str,
        cents: int,
        currency: str,
        rng: random.Random,
    ) -> None:
        """Settlement (always), refund (sometimes) and outcome (rarely) of one order."""
        suffix = f"{self._calendar.day_text(day).replace('-', '')}-{seq:06d}"
        iso = self._calendar.iso
        secs = (day + rng.randint(1, 3)) * DAY_SECONDS + rng.randrange(DAY_SECONDS)
        settlement_id = f"stl-{suffix}"
        settlement: Fields = (
            ("schema_version", "1", True),
            ("event_id", settlement_id, True),
            ("event_time", iso(secs), True),
            ("order_id", order_id, True),
            ("amount", cents_text(cents), False),
            ("currency", currency, True),
            ("revision", "1", False),
        )
        self._planter.deliver(Feed.SETTLEMENTS, secs, settlement_id, settlement, rng, day)
        ringed = person.ring is not None
        if rng.random() < (0.02 if ringed else 0.05):
            refund_cents = cents if rng.random() < 0.7 else max(1, cents * rng.randint(10, 90) // 100)
            secs = (day + rng.randint(1, 20)) * DAY_SECONDS + rng.randrange(DAY_SECONDS)
            refund_id = f"ref-{suffix}"
            refund: Fields = (
                ("schema_version", "1", True),
                ("event_id", refund_id, True),
                ("event_time", iso(secs), True),
                ("order_id", order_id, True),
                ("customer_email", rng.choice(person.emails), True),
                ("amount", cents_text(refund_cents), False),
                ("currency", currency, True),
                ("revision", "1", False),
            )
            self._planter.deliver(Feed.REFUNDS, secs, refund_id, refund, rng, day)
        if rng.random() < (0.35 if ringed else 0.015 + (0.02 if cents > 20_000 else 0.0)):
            label = "fraud" if rng.random() < (0.75 if ringed else 0.3) else "chargeback"
            # Confirmation day 30-89 days after the order; delivery that day or the next,
            # so outcomes always arrive 30-90 days after their order.
            secs = (day + rng.randint(30, 89)) * DAY_SECONDS + rng.randrange(DAY_SECONDS)
            outcome_id = f"out-{suffix}"
            outcome: Fields = (
                ("schema_version", "1", True),
                ("event_id", outcome_id, True),
                ("event_time", iso(secs), True),
                ("order_id", order_id, True),
                ("label", label, True),
                ("revision", "1", False),
            )
            self._planter.deliver(Feed.OUTCOMES, secs, outcome_id, outcome, rng, day)


def order_fields(
    *,
    v1: bool,
    event_id: str,
    time_text: str,
    email: str,
    card: str,
    device: str,
    cents: int,
    currency: str,
    merchant: str,
) -> Fields:
    """An order record in schema v1 (``email``, ``amount_cents``) or v2 (``customer_email``,
    ``amount`` with two decimals)."""
    if v1:
        return (
            ("schema_version", "1", True),
            ("event_id", event_id, True),
            ("event_time", time_text, True),
            ("email", email, True),
            ("card_fingerprint", card, True),
            ("device_id", device, True),
            ("amount_cents", str(cents), False),
            ("currency", currency, True),
            ("merchant_id", merchant, True),
            ("revision", "1", False),
        )
    return (
        ("schema_version", "2", True),
        ("event_id", event_id, True),
        ("event_time", time_text, True),
        ("customer_email", email, True),
        ("card_fingerprint", card, True),
        ("device_id", device, True),
        ("amount", cents_text(cents), False),
        ("currency", currency, True),
        ("merchant_id", merchant, True),
        ("revision", "1", False),
    )
