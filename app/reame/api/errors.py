"""OpenAI-shaped error bodies: {"error": {"message", "type", "param", "code"}}."""

from __future__ import annotations

from pydantic import ValidationError

_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    404: "invalid_request_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
    500: "server_error",
    503: "server_error",
}


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code
        self.headers = headers or {}

    def body(self) -> dict[str, object]:
        return {
            "error": {
                "message": self.message,
                "type": _TYPES.get(self.status, "invalid_request_error"),
                "param": self.param,
                "code": self.code,
            }
        }


def _input_path(loc: tuple[int | str, ...], body: object) -> list[int | str]:
    """The steps of an error's location that are in the body: pydantic adds steps of its own
    (a union member's name, `[key]`) that name no field."""
    path: list[int | str] = []
    for part in loc:
        is_key = isinstance(body, dict) and part in body
        is_index = isinstance(body, list) and isinstance(part, int) and 0 <= part < len(body)
        if is_key or is_index:
            body = body[part]  # type: ignore[index]
            path.append(part)
    return path


def from_validation_error(exc: ValidationError, body: object = None) -> ApiError:
    """The most telling problem, named by its field path in `body`, as a 400: of a union's
    errors, one for each member, the one deepest in the body, and not a mere wrong type."""
    errors = exc.errors()
    if body is None:
        paths = [list(err["loc"]) for err in errors]
    else:
        paths = [
            _input_path(err["loc"], body) + ([err["loc"][-1]] if err["type"] == "missing" else [])
            for err in errors
        ]
    best = max(
        range(len(errors)),
        key=lambda i: (len(paths[i]), not errors[i]["type"].endswith("_type"), -i),
    )
    err = errors[best]
    path = ".".join(str(p) for p in paths[best])
    if err["type"] == "extra_forbidden":
        return ApiError(
            400, f"Unrecognized request argument supplied: {path}", path, "unknown_parameter"
        )
    if err["type"] == "missing":
        return ApiError(
            400, f"Missing required parameter: '{path}'", path, "missing_required_parameter"
        )
    message = err["msg"].removeprefix("Value error, ")
    return ApiError(400, f"Invalid value for '{path}': {message}", path or None, "invalid_value")
