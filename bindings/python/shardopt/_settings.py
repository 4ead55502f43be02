"""Settings: Python properties over the fields of the C options structs. The library checks every value set
(its validate functions), so a bad value fails at once in its words; nothing here restates a default or a range."""
import operator

import numpy as np

from . import shardopt_native as _n
from .errors import InvalidArgumentError, ShardoptError, error, refused

SWITCH = "switch"  # a shardopt_switch field, seen as a bool


def set_checked(struct, field, value, setting, validate, zero_means_default=False):
    """struct.field = value if the library's `validate` accepts the struct, else the field stays and the library's
    error names `setting`. Where the C struct reads 0 as "the default", an explicit 0 is refused (leave it unset)."""
    if zero_means_default and value == 0:
        raise error(InvalidArgumentError, _n.SHARDOPT_ERR_INVALID_ARGUMENT, f"{setting} = 0: the C options read 0 as "
                    f"'the default' here; leave {setting} unset for the library's default")
    old = getattr(struct, field)
    try:
        setattr(struct, field, value)
        return validate(struct)
    except ShardoptError as e:
        failure = refused(e, f"{setting} = {value!r}")
    setattr(struct, field, old)
    raise failure


def convert(kind, value):
    if kind is SWITCH:
        return _n.SHARDOPT_ENABLE if value else _n.SHARDOPT_DISABLE
    return int(bool(value)) if kind is bool else operator.index(value) if kind is int else float(value)


class Setting:
    """A property over `field` of the C struct in attribute `struct` of its object, of kind float, int, bool or
    SWITCH; `validate`: the library's check of the whole struct."""

    def __init__(self, struct, field, kind=float, validate=None, zero_means_default=False, doc=None):
        self.struct, self.field, self.kind, self.validate, self.zero, self.__doc__ = (struct, field, kind, validate,
                                                                                      zero_means_default, doc)

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, cls=None):
        if obj is None:
            return self
        v = getattr(getattr(obj, self.struct), self.field)
        return v == _n.SHARDOPT_ENABLE if self.kind is SWITCH else bool(v) if self.kind is bool else v

    def __set__(self, obj, value):
        set_checked(getattr(obj, self.struct), self.field, convert(self.kind, value), self.name, self.validate,
                    self.zero)


def apply_settings(obj, kwargs):
    """A constructor's keyword arguments, each a setting (or property) of obj's class."""
    for k, v in kwargs.items():
        if not isinstance(getattr(type(obj), k, None), (Setting, property)):
            raise TypeError(f"{type(obj).__name__} has no setting '{k}'")
        setattr(obj, k, v)


def parse_enum(cls, value, what, aliases=None):
    """A member of the IntEnum cls from itself, its value, or its name in any case, with or without '_' and '-'."""
    key = value.replace("_", "").replace("-", "").upper() if isinstance(value, str) else None
    names = dict({m.name.replace("_", ""): m for m in cls}, **(aliases or {}))
    if key in names:
        return names[key]
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value in set(cls):
        return cls(int(value))
    raise ValueError(f"unknown {what} {value!r} (one of {', '.join(m.name.lower() for m in cls)})")
