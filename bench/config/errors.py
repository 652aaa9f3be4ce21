"""The one error bad input raises anywhere in the configuration."""


class ConfigError(ValueError):
    """Bad input. ``str(err)`` is the one line printed before exit code 2."""
