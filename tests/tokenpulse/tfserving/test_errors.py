"""The shared TF Serving error types and REST error bodies."""

from __future__ import annotations

from tokenpulse.tfserving.errors import (
    ConfigError,
    TfServingError,
    TfServingHttpError,
    error_body,
    error_message,
)


def test_error_bodies_round_trip_and_non_json_bodies_have_no_message() -> None:
    import json

    body = json.dumps(error_body("Servable not found for request: Latest(gen)"))
    assert error_message(body) == "Servable not found for request: Latest(gen)"
    assert error_message(b"<html>502 Bad Gateway</html>") == ""
    assert error_message('{"error": 3}') == "" and error_message("[]") == ""


def test_http_errors_keep_status_and_message() -> None:
    err = TfServingHttpError(404, "Could not find any versions of model gen")
    assert isinstance(err, TfServingError) and err.status == 404
    assert err.message == "Could not find any versions of model gen"
    assert str(err) == "http 404: Could not find any versions of model gen"


def test_config_errors_render_like_protobuf_and_name_the_file() -> None:
    err = ConfigError("unknown field", 3, 7)
    assert str(err) == "3:7 : unknown field"
    assert str(err.in_file("/m/models.config")) == "/m/models.config:3:7 : unknown field"
    assert str(ConfigError("no base_path").in_file("f")) == "f: no base_path"
