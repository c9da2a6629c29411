"""gRPC PredictionService (Predict, GetModelMetadata) and ModelService (GetModelStatus,
HandleReloadConfigRequest) with tensorflow-serving-api's generated stubs, on grpc.aio."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import grpc
from tensorflow_serving.apis import (
    get_model_metadata_pb2,
    model_management_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
)

from serving.modelserver.manager import ModelManager
from serving.modelserver.metrics import ServingMetrics
from serving.modelserver.predict import (
    Predictor,
    check_output_filter,
    fill_response,
    request_inputs,
)
from serving.modelserver.protos import metadata_response, status_response
from serving.modelserver.status import CODE_NUMBER, ServingError, invalid_argument
from tokenpulse.logging import get_logger

log = get_logger(__name__)


def _spec(model_spec: Any) -> tuple[str, int | None, str | None]:
    choice = model_spec.WhichOneof("version_choice")
    version = model_spec.version.value if choice == "version" else None
    label = model_spec.version_label if choice == "version_label" else None
    return model_spec.name, version, label


async def _abort(context: grpc.aio.ServicerContext, exc: ServingError) -> None:
    await context.abort(exc.grpc_code(), exc.message)


class PredictionService(prediction_service_pb2_grpc.PredictionServiceServicer):
    """Predict and GetModelMetadata."""

    def __init__(self, manager: ModelManager, predictor: Predictor, metrics: ServingMetrics):
        self.manager = manager
        self.predictor = predictor
        self.metrics = metrics

    async def Predict(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        """Run the signature; request_count always, request_latency on success."""
        start = time.perf_counter()
        name = self.manager.metric_label(request.model_spec.name)
        try:
            response = await self._predict(request)
        except ServingError as exc:
            self.metrics.request_count.inc(name, exc.code)
            await _abort(context, exc)
            raise  # abort raises; this keeps type checkers quiet
        except asyncio.CancelledError:
            self.metrics.request_count.inc(name, "CANCELLED")
            raise
        except Exception as exc:  # never a stack trace to the client
            log.exception("grpc predict failed", model=name)
            self.metrics.request_count.inc(name, "INTERNAL")
            await context.abort(grpc.StatusCode.INTERNAL, f"internal error: {exc}")
            raise
        self.metrics.request_count.inc(name, "OK")
        self.metrics.request_latency.observe(
            int((time.perf_counter() - start) * 1e6), name, "Predict", "GRPC"
        )
        return response

    async def _predict(self, request: Any) -> Any:
        name, version, label = _spec(request.model_spec)
        servable = self.manager.resolve(name, version, label)
        try:
            sig = servable.signature(request.model_spec.signature_name)
            wanted = check_output_filter(sig, list(request.output_filter))
            inputs = request_inputs(request)
            outputs = await self.predictor.run_async(name, servable, sig.name, inputs)
            response = predict_pb2.PredictResponse()
            fill_response(response, servable, sig, outputs, wanted)
            return response
        finally:
            servable.release()

    async def GetModelMetadata(self, request: Any, context: Any) -> Any:  # noqa: N802
        """Only the `signature_def` field, as in TF Serving."""
        try:
            if not request.metadata_field:
                raise invalid_argument(
                    "GetModelMetadataRequest must specify at least one metadata_field"
                )
            for field in request.metadata_field:
                if field != "signature_def":
                    raise invalid_argument(f"Metadata field {field} is not supported")
            name, version, label = _spec(request.model_spec)
            servable = self.manager.resolve(name, version, label)
            try:
                return metadata_response(servable)
            finally:
                servable.release()
        except ServingError as exc:
            await _abort(context, exc)
            return get_model_metadata_pb2.GetModelMetadataResponse()

    async def Classify(self, request: Any, context: Any) -> Any:  # noqa: N802
        """Not served: the model only has a predict signature."""
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, "Classify is not supported")

    async def Regress(self, request: Any, context: Any) -> Any:  # noqa: N802
        """Not served: the model only has a predict signature."""
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, "Regress is not supported")

    async def MultiInference(self, request: Any, context: Any) -> Any:  # noqa: N802
        """Not served: the model only has a predict signature."""
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, "MultiInference is not supported")


class ModelService(model_service_pb2_grpc.ModelServiceServicer):
    """GetModelStatus and HandleReloadConfigRequest."""

    def __init__(self, manager: ModelManager) -> None:
        self.manager = manager

    async def GetModelStatus(self, request: Any, context: Any) -> Any:  # noqa: N802
        """Every version's state (or the requested version's)."""
        try:
            if not request.HasField("model_spec"):
                raise invalid_argument("Missing ModelSpec")
            name, version, _ = _spec(request.model_spec)
            return status_response(self.manager.version_states(name, version))
        except ServingError as exc:
            await _abort(context, exc)
            raise

    async def HandleReloadConfigRequest(self, request: Any, context: Any) -> Any:  # noqa: N802
        """Replace the model list; returns once new models loaded, status in body and code."""
        response = model_management_pb2.ReloadConfigResponse()
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(None, self.manager.apply_config, request.config)
        except ServingError as exc:
            response.status.error_code = CODE_NUMBER[exc.code]
            response.status.error_message = exc.message
            context.set_code(exc.grpc_code())
            context.set_details(exc.message)
            return response
        response.status.error_code = 0
        return response


def add_services(
    server: grpc.aio.Server, manager: ModelManager, predictor: Predictor, metrics: ServingMetrics
) -> None:
    """Register both services on a grpc.aio server."""
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(
        PredictionService(manager, predictor, metrics), server
    )
    model_service_pb2_grpc.add_ModelServiceServicer_to_server(ModelService(manager), server)
