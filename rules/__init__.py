"""The Datalog rule library (Soufflé dialect)."""

from pathlib import Path

RULES_DIR = Path(__file__).parent
