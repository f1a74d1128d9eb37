"""The fact schema: `schema.dl`, the contract between extractors and rules."""

from pathlib import Path

SCHEMA_PATH = Path(__file__).with_name("schema.dl")
