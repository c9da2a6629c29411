"""Wires the pieces together: `run(settings)` blocks until SIGINT/SIGTERM, then shuts down."""

from __future__ import annotations

import asyncio
import signal
import time
from typing import Any

from serving.modelserver.config_files import (
    ConfigFileError,
    parse_batching_parameters,
    parse_model_server_config,
    parse_monitoring_config,
    single_model_config,
)
from serving.modelserver.settings import ModelServerSettings
from serving.modelserver.status import ServingError
from tokenpulse.logging import get_logger
from tokenpulse.tfimport import import_tensorflow

log = get_logger(__name__)


class StartupError(Exception):
    """The server cannot start (bad files, no loadable version, ports in use)."""


def run(settings: ModelServerSettings) -> None:
    """Load the configured models, serve gRPC + REST until a signal, then stop cleanly.

    The config files are read before TensorFlow is imported (they need none of it), so a bad
    one stops the server in a fraction of a second, not after a 2-3 s import."""
    try:
        params = (
            parse_batching_parameters(settings.batching_parameters_file)
            if settings.enable_batching
            else None
        )
        monitoring = parse_monitoring_config(settings.monitoring_config_file)
        config = (
            parse_model_server_config(settings.model_config_file)
            if settings.model_config_file is not None
            else single_model_config(settings.model_name, str(settings.model_base_path))
        )
    except ConfigFileError as exc:
        raise StartupError(str(exc)) from exc
    if params is not None:
        _refuse_batch_splitting(params, settings.batching_parameters_file)
    import_tensorflow()  # before anything else that imports it, so that nothing imports Keras
    configure_tensorflow(settings)
    from serving.modelserver.batching import BatchScheduler
    from serving.modelserver.manager import ModelManager, Poller, list_versions
    from serving.modelserver.metrics import ServingMetrics
    from serving.modelserver.predict import Predictor

    metrics = ServingMetrics()
    scheduler = BatchScheduler(params, metrics) if params is not None else None
    predictor = Predictor(metrics, scheduler)
    manager = ModelManager(
        metrics,
        warmup=predictor.warmup if settings.enable_model_warmup else None,
        on_unload=predictor.forget,
        allow_labels_for_unavailable=settings.allow_version_labels_for_unavailable_models,
        load_retries=settings.max_num_load_retries,
        load_retry_interval_s=settings.load_retry_interval_micros / 1e6,
    )
    poller = Poller(
        manager,
        settings.file_system_poll_wait_seconds,
        settings.model_config_file,
        settings.model_config_file_poll_wait_seconds,
        parse_model_server_config,
    )
    _freeze_runtime()
    try:
        _load_initial(manager, config, settings, list_versions)
        poller.start()
        asyncio.run(_serve(settings, manager, predictor, metrics, monitoring))
    finally:
        poller.stop()
        manager.shutdown()
        if scheduler is not None:
            scheduler.stop()
        predictor.close()
        log.info("model server stopped")


def _freeze_runtime() -> None:
    """Move what is alive before the first load (TensorFlow's and our modules' objects, which live
    as long as the process) out of the cyclic collector's reach.

    TF Serving is C++: loading or unloading a version never pauses its metrics page. Ours is
    Python, and a full collection walks every tracked object, ~390k after `import tensorflow`:
    0.2-0.6 s holding the GIL at each version load on an idle machine, long enough on a busy one
    to fail a scrape (2 s in the compressed drills), which `up` counts as an outage. Frozen, a
    collection walks only the loaded versions' objects. Versions load after this, so an unloaded
    version's garbage is still collected.
    """
    import gc

    import tensorflow  # noqa: F401  (imported so its module objects are frozen with the rest)

    gc.collect()
    gc.freeze()


def configure_tensorflow(settings: ModelServerSettings) -> None:
    """TensorFlow as the flags ask, before its runtime starts: its pools sized (a container's
    CPU limit, not the node's cores; 0 leaves TensorFlow's default), and Grappler's rewrites off
    with graph_rewrites off. The `tiny` export's first call of each signature then cost 0.5-0.8
    CPU-s here instead of 1.5-1.7 (1.2 CPU-s of warmup instead of 3.1), and its steady decoding
    (batch 8, 48 tokens) no more. Larger models gain from the rewrites, so they stay on by
    default."""
    import tensorflow as tf

    if not settings.graph_rewrites:
        tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
    if settings.tensorflow_intra_op_parallelism:
        tf.config.threading.set_intra_op_parallelism_threads(
            settings.tensorflow_intra_op_parallelism
        )
    if settings.tensorflow_inter_op_parallelism:
        tf.config.threading.set_inter_op_parallelism_threads(
            settings.tensorflow_inter_op_parallelism
        )


def preload() -> None:
    """Import what `run` imports once the flags are read, TensorFlow first, and start nothing: for
    a parent that forks model servers (stack.zygote)."""
    import importlib

    import_tensorflow()
    for name in ("grpc", "aiohttp.web", "tensorflow_serving.apis.prediction_log_pb2",
                 "tokenpulse.http_limits"):  # fmt: skip
        importlib.import_module(name)
    for name in ("batching", "grpc_api", "manager", "metrics", "predict", "rest"):
        importlib.import_module(f"serving.modelserver.{name}")


def _refuse_batch_splitting(params: Any, path: Any) -> None:
    """Large-batch splitting is not implemented; say so instead of ignoring the fields."""
    from serving.modelserver.config_files import BatchingParameters

    set_fields = [
        name
        for name in ("enable_large_batch_splitting", "max_execution_batch_size")
        if getattr(params, name) != getattr(BatchingParameters, name)
    ]
    if set_fields:
        raise StartupError(
            f"{path}: {' and '.join(set_fields)} are not supported by this model server: it "
            "never splits a task across batches, so a request larger than max_batch_size is "
            "refused. Remove them, and raise max_batch_size if larger requests must pass"
        )


def _load_initial(
    manager: Any, config: Any, settings: ModelServerSettings, list_versions: Any
) -> None:
    """Like ServerCore::Create: every model must have an AVAILABLE version before ports open."""
    from serving.modelserver.config_files import resolve_base_path

    try:
        manager.apply_config(config)
    except ServingError as exc:
        raise StartupError(exc.message) from exc
    interval = max(settings.file_system_poll_wait_seconds, 0.5)
    while True:
        waiting = [n for n in manager.model_names() if not manager.available(n)]
        if not waiting:
            return
        for model in config.model_config_list.config:
            if model.name not in waiting:
                continue
            states = manager.version_states_or_empty(model.name)
            on_disk = list_versions(resolve_base_path(model.base_path))
            if on_disk and states and all(s.state == "END" for s in states.values()):
                errors = "; ".join(s.error_message for s in states.values() if s.error_message)
                raise StartupError(f"no version of model {model.name} could be loaded: {errors}")
        if settings.file_system_poll_wait_seconds < 0:
            raise StartupError(f"no versions found for models {waiting} and polling is disabled")
        time.sleep(interval)
        manager.poll()


async def _serve(
    settings: ModelServerSettings, manager: Any, predictor: Any, metrics: Any, monitoring: Any
) -> None:
    import grpc
    from aiohttp import web

    from serving.modelserver.grpc_api import add_services
    from serving.modelserver.rest import RestApi, build_app
    from tokenpulse.http_limits import HttpLimits, start_site

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    grpc_server = grpc.aio.server(
        options=[("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]
    )
    add_services(grpc_server, manager, predictor, metrics)
    try:
        grpc_server.add_insecure_port(f"{settings.host}:{settings.port}")
    except RuntimeError as exc:
        raise StartupError(f"cannot bind gRPC port {settings.port}") from exc
    await grpc_server.start()
    log.info("running gRPC ModelServer", address=f"{settings.host}:{settings.port}")
    runner = None
    api = None
    if settings.rest_api_port:
        metrics_path = monitoring.prometheus_path if monitoring.prometheus_enable else None
        api = RestApi(
            manager,
            predictor,
            metrics,
            settings.rest_api_timeout_in_ms,
            settings.rest_api_max_body_bytes,
        )
        runner = web.AppRunner(build_app(api, metrics_path), access_log=None)
        await runner.setup()
        limits = HttpLimits(
            header_timeout_s=settings.rest_api_header_timeout_seconds,
            idle_timeout_s=settings.rest_api_idle_timeout_seconds,
            max_connections=settings.rest_api_max_connections,
        )
        try:
            await start_site(
                runner,
                settings.host,
                settings.rest_api_port,
                limits,
                on_event=lambda event: log.warning("rest connection refused", reason=event),
            )
        except OSError as exc:
            await grpc_server.stop(None)
            raise StartupError(f"cannot bind REST port {settings.rest_api_port}") from exc
        log.info(
            "exporting HTTP/REST API",
            address=f"{settings.host}:{settings.rest_api_port}",
            metrics_path=metrics_path,
        )
    await stop.wait()
    log.info("shutting down")
    if runner is not None:
        await runner.cleanup()
    if api is not None:
        api.close()
    await grpc_server.stop(5)
