"""pylance's pydantic support: ``lance.pydantic`` (``pydantic_to_schema``, ``Vector``,
``MultiVector``), ``LanceDataset.from_pydantic_model`` and lists of models handed to
``write_dataset``. The same models give the same schemas and the same datasets as pylance's, both
ways (pylance reads what lance_table wrote and the reverse); pydantic stays optional."""

# ruff: noqa: UP006, UP007, UP045 - the typing forms (List, Optional, Union) are the point
import datetime as dt
import enum
import subprocess
import sys
from pathlib import Path
from typing import Any, List, Optional, Tuple, Union  # noqa: UP035

import lance
import lance.pydantic as lp
import pyarrow as pa
import pydantic
import pytest
from pydantic import BaseModel, Field

import lance_table as lt
import lance_table.pydantic as ltp


class Color(str, enum.Enum):
    RED = "red"
    BLUE = "blue"


class Level(enum.Enum):
    LOW = 1
    HIGH = 2


class Mixed(enum.Enum):
    A = 1
    B = "b"


class Inner(BaseModel):
    x: int
    y: Optional[str] = None


def _models(side: Any) -> dict[str, type[BaseModel]]:
    """The same models, their vector fields made with ``side``'s ``Vector``/``MultiVector``."""

    class Scalars(BaseModel):
        i: int
        f: float
        s: str
        b: bool
        by: bytes
        d: dt.date
        ts: dt.datetime
        tz: dt.datetime = Field(json_schema_extra={"tz": "UTC"})
        dflt: int = 5

    class Optionals(BaseModel):
        o: Optional[int] = None
        o2: int | None = None
        o3: Union[str, None] = None
        ol: Optional[List[int]] = None
        oinner: Optional[Inner] = None

    class Lists(BaseModel):
        li: List[int]
        lo: List[Optional[str]]
        l3: list[float]
        tu: Tuple[int, ...]
        nested: list[list[str]]
        linner: List[Inner]

    class Nested(BaseModel):
        inner: Inner
        deeper: Optional[Scalars] = None

    class Vectors(BaseModel):
        v: side.Vector(3)
        v16: side.Vector(2, pa.float16(), nullable=False)
        mv: side.MultiVector(2)
        mv_strict: side.MultiVector(2, nullable=False)

    class Enums(BaseModel):
        c: Color
        n: Level
        m: Mixed

    return {m.__name__: m for m in (Scalars, Optionals, Lists, Nested, Vectors, Enums)}


@pytest.mark.parametrize("name", ["Scalars", "Optionals", "Lists", "Nested", "Vectors", "Enums"])
def test_schemas_are_pylances(name: str) -> None:
    theirs = lp.pydantic_to_schema(_models(lp)[name])
    assert ltp.pydantic_to_schema(_models(ltp)[name]) == theirs
    # a model written for pylance (its Vector types) gives the same schema here
    assert ltp.pydantic_to_schema(_models(lp)[name]) == theirs


@pytest.mark.parametrize(
    "annotation",
    [List, list, dict, dict[str, int], Union[int, str], Optional[Union[int, str]], dt.time, set[int], Any],
    ids=str,
)
def test_unsupported_annotations_are_type_errors_as_in_pylance(annotation: Any) -> None:
    model = pydantic.create_model("Bad", z=(annotation, ...))
    with pytest.raises(TypeError):
        lp.pydantic_to_schema(model)
    with pytest.raises(TypeError):
        ltp.pydantic_to_schema(model)


def test_nullability_and_extras_as_pylance() -> None:
    for side in (lp, ltp):
        fields = _models(side)["Optionals"].model_fields
        assert [ltp.is_nullable(f) for f in fields.values()] == [lp.is_nullable(f) for f in fields.values()]
        tz = _models(side)["Scalars"].model_fields["tz"]
        assert ltp.get_extras(tz, "tz") == lp.get_extras(tz, "tz") == "UTC"
        assert ltp.get_extras(tz, "other") is None


def _rows(side: Any) -> list[BaseModel]:
    models = _models(side)
    s1 = dict(
        i=1, f=1.5, s="a", b=True, by=b"x", d=dt.date(2020, 1, 2), ts=dt.datetime(2020, 1, 2, 3, 4, 5),
        tz=dt.datetime(2020, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc),
    )  # fmt: skip

    Row = pydantic.create_model(
        "Row",
        id=(int, ...),
        scalars=(models["Scalars"], ...),
        opt=(models["Optionals"], ...),
        lists=(models["Lists"], ...),
        vec=(models["Vectors"], ...),
        color=(Color, ...),
        maybe=(Optional[float], None),
    )

    lists = dict(li=[1, 2], lo=["a", None], l3=[1.0], tu=(1, 2, 3), nested=[["a"], []], linner=[Inner(x=2)])
    empty = dict(li=[], lo=[], l3=[], tu=(), nested=[], linner=[])
    vec = dict(v=[1, 2, 3], v16=[1, 2], mv=[[1, 2], [3, 4]], mv_strict=[])
    return [
        Row(id=1, scalars=s1, opt={}, lists=lists, vec=vec, color=Color.RED),
        Row(
            id=2,
            scalars={**s1, "i": 2, "s": "é", "tz": dt.datetime(2021, 6, 1, tzinfo=dt.timezone.utc)},
            opt=dict(o=3, o2=4, o3="x", ol=[7], oinner=Inner(x=9, y="q")),
            lists=empty,
            vec=dict(v=[4, 5, 6], v16=[3, 4], mv=[], mv_strict=[[5, 6]]),
            color="blue",
            maybe=2.5,
        ),
    ]


def test_from_pydantic_model_writes_pylances_dataset_both_ways(tmp_path: Path) -> None:
    ours_rows, their_rows = _rows(ltp), _rows(lp)
    ours = lt.LanceDataset.from_pydantic_model(type(ours_rows[0]), ours_rows, str(tmp_path / "ours"))
    theirs = lance.LanceDataset.from_pydantic_model(type(their_rows[0]), their_rows, str(tmp_path / "theirs"))
    assert isinstance(ours, lt.LanceDataset)
    expected = theirs.to_table()
    assert ours.schema == theirs.schema
    assert lance.dataset(str(tmp_path / "ours")).to_table().equals(expected)
    assert lt.dataset(str(tmp_path / "theirs")).to_table().equals(expected)
    assert ours.to_table().equals(expected)
    # kwargs go to write_dataset, mode too
    again = lt.LanceDataset.from_pydantic_model(
        type(ours_rows[0]), ours_rows, tmp_path / "ours", mode="append", commit_message="more"
    )
    assert again.count_rows() == 4 and lance.dataset(str(tmp_path / "ours")).count_rows() == 4


def test_write_dataset_takes_a_list_of_models_as_pylance(tmp_path: Path) -> None:
    ours_rows, their_rows = _rows(ltp), _rows(lp)
    lt.write_dataset(ours_rows, str(tmp_path / "ours"))
    lance.write_dataset(their_rows, str(tmp_path / "theirs"))
    expected = lance.dataset(str(tmp_path / "theirs")).to_table()
    assert lance.dataset(str(tmp_path / "ours")).to_table().equals(expected)
    # appended with an explicit schema (the dataset's)
    ds = lt.write_dataset(ours_rows, str(tmp_path / "ours"), mode="append", schema=expected.schema)
    assert ds.to_table().equals(pa.concat_tables([expected, expected]))
    merged = ds.merge_insert("id").when_matched_update_all().execute(ours_rows[:1])
    assert merged["num_updated_rows"] == 2


def test_default_uri_is_the_snake_case_class_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class UserEvent(BaseModel):
        id: int

    monkeypatch.chdir(tmp_path)
    lt.LanceDataset.from_pydantic_model(UserEvent, [UserEvent(id=1)])
    assert lance.dataset(str(tmp_path / "user_event")).to_table().to_pylist() == [{"id": 1}]
    assert ltp.snake_case("HTTPThing") == "h_t_t_p_thing"


def test_bad_arguments_fail_as_in_pylance(tmp_path: Path) -> None:
    class A(BaseModel):
        id: int

    class B(A):
        extra: int = 0

    cases: list[tuple[Any, Any, type[Exception]]] = [
        (dict, [A(id=1)], TypeError),  # not a model class
        (A, (A(id=1),), TypeError),  # not a list
        (A, [A(id=1), B(id=2)], TypeError),  # a subclass instance
        (A, [], ValueError),
    ]
    for i, (model, data, error) in enumerate(cases):
        with pytest.raises(error):
            lance.LanceDataset.from_pydantic_model(model, data, str(tmp_path / f"t{i}"))
        with pytest.raises(error):
            lt.LanceDataset.from_pydantic_model(model, data, str(tmp_path / f"o{i}"))
        assert not (tmp_path / f"o{i}").exists()


def test_enums_whose_values_are_not_strings_fail_as_in_pylance(tmp_path: Path) -> None:
    class E(BaseModel):
        n: Level

    with pytest.raises(pa.ArrowInvalid):
        lance.LanceDataset.from_pydantic_model(E, [E(n=Level.LOW)], str(tmp_path / "t"))
    with pytest.raises(pa.ArrowInvalid):
        lt.LanceDataset.from_pydantic_model(E, [E(n=Level.LOW)], str(tmp_path / "o"))


def test_vector_lengths_are_validated() -> None:
    for side in (lp, ltp):
        model = _models(side)["Vectors"]
        with pytest.raises(pydantic.ValidationError):
            model(v=[1, 2], v16=[1, 2], mv=[], mv_strict=[])
        with pytest.raises(pydantic.ValidationError):
            model(v=[1, 2, 3], v16=[1, 2], mv=[[1, 2, 3]], mv_strict=[])
        row = model(v=[1, 2, 3], v16=[1, 2], mv=[[1, 2]], mv_strict=[])
        assert isinstance(row.v, list) and row.v.dim() == 3
    assert repr(ltp.Vector(4)([1])) == repr(lp.Vector(4)([1]))
    assert repr(ltp.MultiVector(4)([])) == repr(lp.MultiVector(4)([]))


def test_lance_table_imports_without_pydantic() -> None:
    code = (
        "import sys; sys.modules['pydantic'] = None\n"
        "import lance_table as lt, pyarrow as pa\n"
        "try:\n    lt.LanceDataset.from_pydantic_model(dict, [{}])\n"
        "except TypeError as e: print('TypeError')\n"
        "try:\n    import lance_table.pydantic\nexcept ImportError: print('ImportError')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["TypeError", "ImportError"]
