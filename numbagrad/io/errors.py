"""The one exception a checkpoint reader raises for a file it cannot trust."""


class CheckpointError(Exception):
    """A checkpoint file is unreadable, truncated, corrupted or not numbagrad's.

    ``path`` is the file (None for a file object without a name), ``key`` the key path
    inside it where the problem was found (None when it is the file as a whole)."""

    def __init__(self, path, reason, key=None):
        self.path = path
        self.key = key
        self.reason = reason
        where = f" at key {key}" if key else ""
        super().__init__(f"{path!r}{where}: {reason}")
