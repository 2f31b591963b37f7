#!/usr/bin/env python3
"""Pydantic models whose model_json_schema() is in schemas/pydantic_*.json.

The schemas are what clients send: the openai SDK's `parse(response_format=Model)`
and vLLM users' `guided_json=Model.model_json_schema()` hand pagoda exactly this
(nested models as $defs/$ref, Optional as anyOf [..., null] with a default,
List, Literal as const/enum, Enum as a $defs entry). Regenerate with
  .venv/bin/python tests/data/structured/pydantic_models.py
(the files record the pydantic version that wrote them in "$comment").
tests/python/server/test_structured_sdk.py also imports these models.
"""
import datetime
import enum
import json
import pathlib
from typing import List, Literal, Optional

import pydantic
from pydantic import BaseModel, Field


class Currency(str, enum.Enum):
    EUR = "EUR"
    USD = "USD"
    GBP = "GBP"


class OrderLine(BaseModel):
    product: str
    quantity: int = Field(ge=1, le=100)
    unit_price: float = Field(ge=0)


class Customer(BaseModel):
    name: str
    email: Optional[str] = None
    loyalty_tier: Literal["none", "silver", "gold"] = "none"


class CustomerOrder(BaseModel):
    order_number: str = Field(pattern=r"^[A-Z]{2}[0-9]{6}$")
    customer: Customer
    lines: List[OrderLine] = Field(min_length=1, max_length=5)
    currency: Currency
    gift_wrap: bool = False
    note: Optional[str] = Field(default=None, max_length=100)


class Venue(BaseModel):
    name: str
    city: str
    capacity: Optional[int] = Field(default=None, ge=1)


class EventListing(BaseModel):
    title: str
    starts_at: datetime.datetime
    ends_at: Optional[datetime.datetime] = None
    venue: Venue
    kind: Literal["concert", "talk", "workshop", "meetup"]
    tags: List[str] = Field(default_factory=list, max_length=4)
    free: bool


class Author(BaseModel):
    full_name: str
    affiliation: Optional[str] = None


class ResearchPaper(BaseModel):
    title: str
    authors: List[Author] = Field(min_length=1)
    year: int = Field(ge=1900, le=2100)
    venue: Optional[str] = None
    keywords: List[str] = Field(max_length=6)
    open_access: bool
    doi: Optional[str] = Field(default=None, pattern=r"^10\.[0-9]{4,9}/[A-Za-z0-9._;()/:-]+$")


class Severity(str, enum.Enum):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    CRITICAL = "critical"


class BugReport(BaseModel):
    title: str = Field(max_length=80)
    severity: Severity
    component: Literal["api", "ui", "database", "auth"]
    steps_to_reproduce: List[str]
    expected: str
    actual: str
    regression: Optional[bool] = None
    reported_on: datetime.date


class Stat(BaseModel):
    name: Literal["str", "dex", "con", "int", "wis", "cha"]
    score: int = Field(ge=3, le=18)


class CharacterSheet(BaseModel):
    name: str
    level: int = Field(ge=1, le=20)
    stats: List[Stat] = Field(min_length=6, max_length=6)
    companion: Optional["CharacterSheet"] = None  # recursive


class CalendarEvent(BaseModel):
    """The openai SDK's structured-output example (client.beta.chat.completions.parse)."""
    name: str
    date: str
    participants: List[str]


MODELS = {
    "pydantic_customer_order": CustomerOrder,
    "pydantic_event_listing": EventListing,
    "pydantic_research_paper": ResearchPaper,
    "pydantic_bug_report": BugReport,
    "pydantic_character_sheet": CharacterSheet,
    "pydantic_calendar_event": CalendarEvent,
}


def main():
    out = pathlib.Path(__file__).resolve().parent / "schemas"
    for name, model in MODELS.items():
        schema = {"$comment": f"{model.__name__}.model_json_schema(), pydantic {pydantic.VERSION}"}
        schema.update(model.model_json_schema())
        (out / f"{name}.json").write_text(json.dumps(schema, indent=2) + "\n")


if __name__ == "__main__":
    main()
