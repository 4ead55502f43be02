"""Settings: Python properties over the fields of the C options structs. The library checks every value
set (its validate functions), so a bad value fails at once with its words; nothing here restates a
default or a range."""
import operator

from . import shardopt_native as _n
from .errors import InvalidArgumentError, ShardoptError, error, refused


def set_checked(struct, field, value, setting, validate, zero_means_default=False):
    """struct.field = value if the library's `validate` accepts the struct, else the field is left as it
    was and the library's error names `setting`. Where the C struct reads 0 as "the default"
    (zero_means_default), an explicit 0 is refused: leave the setting unset for the default."""
    if zero_means_default and value == 0:
        raise error(InvalidArgumentError, _n.SHARDOPT_ERR_INVALID_ARGUMENT,
                    f"{setting} = 0: the C options read 0 as 'the default' here; leave {setting} unset for "
                    "the library's default")
    old = getattr(struct, field)
    try:
        setattr(struct, field, value)
        validate(struct)
        return
    except ShardoptError as e:
        failure = refused(e, f"{setting} = {value!r}")
    setattr(struct, field, old)
    raise failure


SWITCH = "switch"  # a shardopt_switch field, seen as a bool


class Setting:
    """A property over `field` of the C struct in the attribute `struct` of its object, of kind float, int,
    bool or SWITCH; `validate` is the library's check of the whole struct."""

    def __init__(self, struct, field, kind=float, validate=None, zero_means_default=False, doc=None):
        self.struct, self.field, self.kind, self.validate, self.zero = struct, field, kind, validate, zero_means_default
        self.__doc__ = doc
        self.name = field

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, cls=None):
        if obj is None:
            return self
        v = getattr(getattr(obj, self.struct), self.field)
        return v == _n.SHARDOPT_ENABLE if self.kind is SWITCH else bool(v) if self.kind is bool else v

    def __set__(self, obj, value):
        if self.kind is SWITCH:
            value = _n.SHARDOPT_ENABLE if value else _n.SHARDOPT_DISABLE
        else:
            value = int(bool(value)) if self.kind is bool else operator.index(value) if self.kind is int else float(value)
        set_checked(getattr(obj, self.struct), self.field, value, self.name, self.validate, self.zero)


def apply_settings(obj, kwargs):
    """Keyword arguments of a constructor, each a Setting or property of obj's class."""
    for k, v in kwargs.items():
        if not isinstance(getattr(type(obj), k, None), (Setting, property)):
            raise TypeError(f"{type(obj).__name__} has no setting '{k}'")
        setattr(obj, k, v)
