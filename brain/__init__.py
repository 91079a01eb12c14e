"""Brains: whatever proposes Ramesh's next turn for the session to validate."""

from brain.rules_vendor import RuleBasedVendor

__all__ = ["RuleBasedVendor"]
