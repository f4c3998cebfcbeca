"""Parsing a store's JSON record: one model per file, and one message for a file that is not one."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from rockmem_mcp.errors import CorruptEntryError

M = TypeVar("M", bound=BaseModel)


def parse_record(model: type[M], data: bytes, path: str | Path, kind: str, noun: str) -> M:
    """`data` as `model`; CorruptEntryError ("{kind} file PATH is not a valid {noun} …") when it is not one."""
    try:
        return model.model_validate_json(data)
    except ValidationError as exc:
        raise CorruptEntryError(
            f"{kind} file {path} is not a valid {noun} ({exc.error_count()} problem(s), first: "
            f"{exc.errors()[0]['msg']}); fix or move it away — rockmem never deletes it"
        ) from None
