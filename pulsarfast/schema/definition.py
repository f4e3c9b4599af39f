"""Record classes and their field types (the official ``pulsar.schema.definition``).

A ``Record`` subclass declares its fields as class attributes (``Integer()``,
``String(required=True)``, another ``Record`` class or instance, an ``Enum``
class, ...); ``RecordMeta`` collects them, in declaration order, into
``_fields``. ``schema()`` gives the Avro-style definition (a dict) that
``JsonSchema`` and ``AvroSchema`` register: its layout, key order included,
is the official one, so that both clients register the same text for the
same class. Setting a field checks its value's type (``TypeError``), and
setting an undeclared one raises ``AttributeError``, as there.
"""
from __future__ import annotations

import copy
from enum import Enum, EnumMeta
from typing import Any

__all__ = ["Record", "RecordMeta", "Field", "Null", "Boolean", "Integer", "Long", "Float", "Double", "Bytes",
           "String", "Array", "Map", "CustomEnum"]

_RESERVED = ("_default", "_required", "_required_default")


def _name_of(thing: Any) -> str:
    return thing.__name__ if hasattr(thing, "__name__") else str(thing)


def _nested_schema(kind: Any, defined: set[str]) -> Any:
    """An Array's items or a Map's values: the nested definition of a container or a record, else
    the type's name (so an enum's is just 'enum', as the official client writes it)."""
    if isinstance(kind, (Array, Map, Record)):
        return kind.schema_info(defined)
    return kind.type()


def _check_item_type(kind: Any) -> None:
    if (type(kind) is type and not issubclass(kind, Record)) and not isinstance(kind, Field):
        raise Exception("Argument %s is not a Record or a Field" % _name_of(kind))


class RecordMeta(type):
    """Collects a Record subclass's declared fields into ``_fields`` (declaration order)."""

    def __new__(mcs, name: str, bases: tuple[type, ...], namespace: dict[str, Any]) -> "RecordMeta":
        if name != "Record":
            fields: dict[str, Any] = {}
            for attr, value in namespace.items():
                if isinstance(value, EnumMeta):
                    value = CustomEnum(value)
                elif type(value) is RecordMeta:
                    value = value()
                if isinstance(value, (Record, Field)):
                    fields[attr] = value
            namespace["_fields"] = fields
            namespace["_required"] = False
        return super().__new__(mcs, name, bases, namespace)


class Record(metaclass=RecordMeta):
    """A structured value: its fields are the class's declared ones."""

    _fields: dict[str, Any]
    #: the Avro namespace of the record's definition (None: none)
    _avro_namespace: str | None = None
    #: True: the definition lists the fields sorted by name
    _sorted_fields: bool = False

    def __init__(self, default: Any = None, required_default: bool = False, required: bool = False,
                 *args: Any, **kwargs: Any) -> None:
        self._required_default = required_default
        self._default = default
        self._required = required
        for name, field in self._fields.items():
            if name in kwargs:
                self.__setattr__(name, self._from_plain(field, kwargs[name]))
            elif isinstance(field, Record):
                self.__setattr__(name, field)
            else:  # (the default, not checked again)
                object.__setattr__(self, name, field.default())

    @staticmethod
    def _from_plain(field: Any, given: Any) -> Any:
        """A field's value from what was given: dicts become the field's records (a record's, an array of
        records', a map of records'), as decoding needs."""
        def build(template: Record, values: dict[str, Any]) -> Record:
            made = copy.copy(template)
            Record.__init__(made, **values)
            return made

        if isinstance(field, Record) and isinstance(given, dict):
            return build(field, given)
        if (isinstance(field, Array) and isinstance(given, list) and given
                and isinstance(field.array_type, Record) and isinstance(given[0], dict)):
            return [build(field.array_type, item) for item in given]
        if (isinstance(field, Map) and isinstance(given, dict) and given
                and isinstance(field.value_type, Record) and isinstance(next(iter(given.values())), dict)):
            return {key: build(field.value_type, value) for key, value in given.items()}
        return given

    @classmethod
    def schema(cls) -> Any:
        """The record's definition (a dict, Avro's record layout)."""
        return cls.schema_info(set())

    @classmethod
    def schema_info(cls, defined_names: set[str]) -> Any:
        full_name = cls.__name__ if cls._avro_namespace is None else "%s.%s" % (cls._avro_namespace, cls.__name__)
        if full_name in defined_names:
            return full_name
        defined_names.add(full_name)
        definition: dict[str, Any] = {"type": "record", "name": str(cls.__name__)}
        if cls._avro_namespace is not None:
            definition["namespace"] = cls._avro_namespace
        fields: list[dict[str, Any]] = []
        definition["fields"] = fields
        names = sorted(cls._fields) if cls._sorted_fields else list(cls._fields)
        for name in names:
            field = cls._fields[name]
            kind = field.schema_info(defined_names)
            if not field._required:
                kind = ["null", kind]
            if field.required_default():
                default = field.default()
                fields.append({"name": name, "default": default.name if isinstance(default, Enum) else default,
                               "type": kind})
            else:
                fields.append({"name": name, "type": kind})
        return definition

    def __setattr__(self, key: str, value: Any) -> None:
        if key not in _RESERVED:
            field = self._fields.get(key)
            if field is None:
                raise AttributeError("Cannot set undeclared field " + key + " on record")
            value = field.validate_type(key, value)
        object.__setattr__(self, key, value)

    def __eq__(self, other: object) -> bool:
        return all(getattr(self, name) == getattr(other, name) for name in self._fields)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __str__(self) -> str:
        return str(self.__dict__)

    def type(self) -> str:
        return str(self.__class__.__name__)

    def python_type(self) -> Any:
        return self.__class__

    def validate_type(self, name: str, val: Any) -> Any:
        if val is None and not self._required:
            return self.default()
        if not isinstance(val, self.__class__):
            raise TypeError("Invalid type '%s' for sub-record field '%s'. Expected: %s"
                            % (val.__class__, name, _name_of(self.__class__)))
        return val

    def default(self) -> Any:
        return self._default

    def required_default(self) -> bool:
        return self._required_default


class Field:
    """A record's field: its default, whether it is required (no null), whether the definition carries
    the default."""

    def __init__(self, default: Any = None, required: bool = False, required_default: bool = False) -> None:
        if default is not None:
            default = self.validate_type("default", default)
        self._default = default
        self._required_default = required_default
        self._required = required

    def type(self) -> str:
        raise NotImplementedError

    def python_type(self) -> Any:
        raise NotImplementedError

    def validate_type(self, name: str, val: Any) -> Any:
        if val is None and not self._required:
            return self.default()
        if not isinstance(val, self.python_type()):
            raise TypeError("Invalid type '%s' for field '%s'. Expected: %s"
                            % (type(val), name, _name_of(self.python_type())))
        return val

    def schema(self) -> Any:
        return self.type()

    def schema_info(self, defined_names: set[str]) -> Any:
        return self.type()

    def default(self) -> Any:
        return self._default

    def required_default(self) -> bool:
        return self._required_default


class Null(Field):
    def type(self) -> str:
        return "null"

    def python_type(self) -> Any:
        return type(None)

    def validate_type(self, name: str, val: Any) -> Any:
        if val is not None:
            raise TypeError("Field " + name + " is set to be None")
        return val


class Boolean(Field):
    def type(self) -> str:
        return "boolean"

    def python_type(self) -> Any:
        return bool

    def default(self) -> Any:
        return self._default if self._default is not None else False


class Integer(Field):
    def type(self) -> str:
        return "int"

    def python_type(self) -> Any:
        return int


class Long(Field):
    def type(self) -> str:
        return "long"

    def python_type(self) -> Any:
        return int


class Float(Field):
    def type(self) -> str:
        return "float"

    def python_type(self) -> Any:
        return float, int


class Double(Field):
    def type(self) -> str:
        return "double"

    def python_type(self) -> Any:
        return float, int


class Bytes(Field):
    def type(self) -> str:
        return "bytes"

    def python_type(self) -> Any:
        return bytes, str

    def validate_type(self, name: str, val: Any) -> Any:
        return val.encode() if isinstance(val, str) else val


class String(Field):
    def type(self) -> str:
        return "string"

    def python_type(self) -> Any:
        return str, bytes

    def validate_type(self, name: str, val: Any) -> Any:
        if val is None and not self._required:
            return self.default()
        if not isinstance(val, (str, bytes)):
            raise TypeError("Invalid type '%s' for field '%s'. Expected a string" % (type(val), name))
        return val.decode() if isinstance(val, bytes) else val


class CustomEnum(Field):
    """A field of an ``Enum`` class's members (given as a member, its name or its value)."""

    def __init__(self, enum_type: Any, default: Any = None, required: bool = False,
                 required_default: bool = False) -> None:
        if not (isinstance(enum_type, type) and issubclass(enum_type, Enum)):
            raise Exception(_name_of(enum_type) + " is not a valid Enum type")
        self.enum_type = enum_type
        self.values = {member.value: member for member in enum_type.__members__.values()}
        super().__init__(default, required, required_default)

    def type(self) -> str:
        return "enum"

    def python_type(self) -> Any:
        return self.enum_type

    def validate_type(self, name: str, val: Any) -> Any:
        if val is None:
            return None
        members = self.enum_type.__members__
        if type(val) is str:
            if val not in members:
                raise TypeError("Invalid enum value '%s' for field '%s'. Expected: %s" % (val, name, members.keys()))
            return members[val]
        if type(val) is int:
            if val not in self.values:
                raise TypeError("Invalid enum value '%s' for field '%s'. Expected: %s"
                                % (val, name, self.values.keys()))
            return self.values[val]
        if not isinstance(val, self.enum_type):
            raise TypeError("Invalid type '%s' for field '%s'. Expected: %s"
                            % (type(val), name, _name_of(self.enum_type)))
        return val

    def schema(self) -> Any:
        return self.schema_info(set())

    def schema_info(self, defined_names: set[str]) -> Any:
        name = self.enum_type.__name__
        if name in defined_names:
            return name
        defined_names.add(name)
        return {"type": "enum", "name": name, "symbols": [member.name for member in self.enum_type]}


class Array(Field):
    """A list of one field type's (or record's) values."""

    def __init__(self, array_type: Any, default: Any = None, required: bool = False,
                 required_default: bool = False) -> None:
        _check_item_type(array_type)
        self.array_type = array_type
        super().__init__(default=default, required=required, required_default=required_default)

    def type(self) -> str:
        return "array"

    def python_type(self) -> Any:
        return list

    def validate_type(self, name: str, val: Any) -> Any:
        if val is None:
            return None
        super().validate_type(name, val)
        wanted = self.array_type.python_type()
        if not all(isinstance(item, wanted) for item in val):
            raise TypeError("Array field " + name + " items should all be of type "
                            + _name_of(self.array_type.type()))
        return val

    def schema(self) -> Any:
        return self.schema_info(set())

    def schema_info(self, defined_names: set[str]) -> Any:
        return {"type": "array", "items": _nested_schema(self.array_type, defined_names)}


class Map(Field):
    """A dict from strings to one field type's (or record's) values."""

    def __init__(self, value_type: Any, default: Any = None, required: bool = False,
                 required_default: bool = False) -> None:
        _check_item_type(value_type)
        self.value_type = value_type
        super().__init__(default=default, required=required, required_default=required_default)

    def type(self) -> str:
        return "map"

    def python_type(self) -> Any:
        return dict

    def validate_type(self, name: str, val: Any) -> Any:
        if val is None:
            return None
        super().validate_type(name, val)
        wanted = self.value_type.python_type()
        for key, value in val.items():
            if type(key) is not str:
                raise TypeError("Map keys for field " + name + "  should all be strings")
            if not isinstance(value, wanted):
                raise TypeError("Map values for field " + name + " should all be of type " + _name_of(wanted))
        return val

    def schema(self) -> Any:
        return self.schema_info(set())

    def schema_info(self, defined_names: set[str]) -> Any:
        return {"type": "map", "values": _nested_schema(self.value_type, defined_names)}
