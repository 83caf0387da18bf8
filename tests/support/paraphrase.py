"""A small collection where one document answers a question without sharing its words: the
paraphrase that only the semantic leg can find (used with the local model)."""

from __future__ import annotations

from typing import Any

PARAPHRASE_DOCS: list[dict[str, Any]] = [
    {"_id": "tyre", "title": "Roadside puncture repair",
     "body": "Remove the wheel, locate the hole in the inner tube, roughen the rubber, apply a patch "
             "and reinflate. Carry tyre levers and a pump on every ride with your bike."},
    {"_id": "bug", "title": "Debugging checklist",
     "body": "How do I fix a bug? Reproduce it, write a failing test, bisect the change, then repair the code."},
    {"_id": "bake", "title": "Sourdough basics",
     "body": "Feed the starter, autolyse the flour, fold the dough four times and bake in a hot oven."},
    {"_id": "tax", "title": "Quarterly VAT filing",
     "body": "Submit the return before the deadline and keep receipts for six years for the auditors."},
]
QUESTION = "how can I mend a flat bicycle tire"
