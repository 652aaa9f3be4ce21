"""The papers' reported numbers beside the reproduced ones: reference values, matching, tables."""
