"""The one exception the CLI turns into a one-line message and a non-zero exit."""


class ConvgenError(Exception):
    """A problem the user can fix: bad flag, impossible size, unsupported type."""
