"""The run configuration: every setting typed and validated once, at the boundary.

A run is described by *settings*: a flat mapping of dotted keys (``task``, ``optimizer.momentum``,
``method.clip``, ...) to values, as they come from the command line, ``--set`` or a grid file.
:func:`resolve` layers them over the task's recipe and tier and returns a frozen :class:`RunConfig`, or
raises :class:`ConfigError` naming the bad item. Nothing runs and nothing is written before that.

- ``settings``: each setting declared once (parser, record type, default, run-id and comparison role,
  flag), and the config part of the record schema derived from them;
- ``runconfig``: :class:`RunConfig`, built from those declarations, and the run id;
- ``resolve``: settings to a RunConfig; ``describe`` for ``--dry-run``;
- ``parsers``, ``userfiles``: checked values, and users' files and YAML read safely;
- ``grid``: grid files expanded into runs.
"""
from commbench.config.errors import ConfigError
from commbench.config.parsers import NET_UNITS, ascii_float, ascii_int, net_rate_bits
from commbench.config.resolve import (check_names, describe, method_param_types, method_params_of, never_acts,
                                      parse_set,
                                      resolve)
from commbench.config.runconfig import RunConfig, flat_items, identity_of, run_id_of, setting_of
from commbench.config.settings import (BOOKKEEPING, DERIVED, GENERIC, IMPLICIT, KEYS, LR_KINDS, MAX_STEPS,
                                       MAX_WORKERS, NOT_COMPARED, NOT_IN_ID, OPTIMIZERS, PRECISIONS, SETTING,
                                       SETTINGS, TIERS, Setting, record_config_schema, run_flags)
from commbench.config.userfiles import MAX_YAML_DEPTH, MAX_YAML_VALUES, load_yaml, read_user_text

__all__ = ["BOOKKEEPING", "DERIVED", "GENERIC", "IMPLICIT", "KEYS", "LR_KINDS", "MAX_STEPS", "MAX_WORKERS",
           "MAX_YAML_DEPTH", "MAX_YAML_VALUES", "NET_UNITS", "NOT_COMPARED", "NOT_IN_ID", "OPTIMIZERS",
           "PRECISIONS", "SETTING", "SETTINGS", "TIERS", "ConfigError", "RunConfig", "Setting", "ascii_float",
           "ascii_int", "check_names", "describe", "flat_items", "identity_of", "load_yaml", "method_param_types",
           "method_params_of",
           "net_rate_bits", "never_acts", "parse_set", "read_user_text", "record_config_schema", "resolve",
           "run_flags", "run_id_of",
           "setting_of"]
