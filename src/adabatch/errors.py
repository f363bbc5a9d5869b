"""The one exception type users see: bad input, named value, allowed values."""


class AdabatchError(ValueError):
    """Bad input or an impossible request; the message is one line fit for a user.

    The CLI prints it as ``adabatch: error: <message>`` and exits with status 2.
    """
