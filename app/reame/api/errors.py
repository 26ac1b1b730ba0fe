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


def from_validation_error(exc: ValidationError) -> ApiError:
    """The first problem, named by its field path, as a 400."""
    err = exc.errors()[0]
    path = ".".join(str(p) for p in err["loc"])
    if err["type"] == "extra_forbidden":
        return ApiError(
            400, f"Unrecognized request argument supplied: {path}", path, "unknown_parameter"
        )
    if err["type"] == "missing":
        return ApiError(
            400, f"Missing required parameter: '{path}'", path, "missing_required_parameter"
        )
    message = err["msg"].removeprefix("Value error, ")
    return ApiError(400, f"Invalid value for '{path}': {message}", path, "invalid_value")
