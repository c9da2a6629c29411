"""Protobuf's own reading of TF Serving's config files, to check ours against.

`model_server_config_pb2` ships in the tensorflow-serving-api wheel; BatchingParameters and
MonitoringConfig do not, so they are declared here from TF Serving's `.proto` files (same names,
numbers and types, proto3 like the originals).
"""

from __future__ import annotations

from typing import Any

from google.protobuf import (
    descriptor_pb2,
    descriptor_pool,
    message_factory,
    text_format,
    wrappers_pb2,
)

from tokenpulse.tfserving.config import (
    DEFAULT_METRICS_PATH,
    BatchingParameters,
    ModelServerConfig,
    MonitoringConfig,
)


def _messages() -> tuple[Any, Any]:
    fdp = descriptor_pb2.FileDescriptorProto(
        name="tests/tfs_text_configs.proto",
        package="tensorflow.serving",
        syntax="proto3",
        dependency=["google/protobuf/wrappers.proto"],
    )
    t = descriptor_pb2.FieldDescriptorProto
    opt, rep = t.LABEL_OPTIONAL, t.LABEL_REPEATED
    batching = fdp.message_type.add(name="BatchingParameters")
    for name, number, type_name in [
        ("max_batch_size", 1, ".google.protobuf.Int64Value"),
        ("batch_timeout_micros", 2, ".google.protobuf.Int64Value"),
        ("max_enqueued_batches", 3, ".google.protobuf.Int64Value"),
        ("num_batch_threads", 4, ".google.protobuf.Int64Value"),
        ("thread_pool_name", 5, ".google.protobuf.StringValue"),
        ("enable_large_batch_splitting", 8, ".google.protobuf.BoolValue"),
        ("max_execution_batch_size", 9, ".google.protobuf.Int64Value"),
    ]:
        batching.field.add(
            name=name, number=number, label=opt, type=t.TYPE_MESSAGE, type_name=type_name
        )
    batching.field.add(name="allowed_batch_sizes", number=6, label=rep, type=t.TYPE_INT64)
    batching.field.add(name="pad_variable_length_inputs", number=7, label=opt, type=t.TYPE_BOOL)
    prom = fdp.message_type.add(name="PrometheusConfig")
    prom.field.add(name="enable", number=1, label=opt, type=t.TYPE_BOOL)
    prom.field.add(name="path", number=2, label=opt, type=t.TYPE_STRING)
    mon = fdp.message_type.add(name="MonitoringConfig")
    mon.field.add(
        name="prometheus_config",
        number=1,
        label=opt,
        type=t.TYPE_MESSAGE,
        type_name=".tensorflow.serving.PrometheusConfig",
    )
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(wrappers_pb2.DESCRIPTOR.serialized_pb)
    pool.Add(fdp)
    find = pool.FindMessageTypeByName
    return (
        message_factory.GetMessageClass(find("tensorflow.serving.BatchingParameters")),
        message_factory.GetMessageClass(find("tensorflow.serving.MonitoringConfig")),
    )


BatchingParametersProto, MonitoringConfigProto = _messages()


def model_server_config(text: str) -> ModelServerConfig:
    """Parse with protobuf, converted to our dataclasses (raises text_format.ParseError)."""
    from tensorflow_serving.config import model_server_config_pb2

    from serving.modelserver.config_files import from_proto

    return from_proto(text_format.Parse(text, model_server_config_pb2.ModelServerConfig()))


def batching_parameters(text: str) -> BatchingParameters:
    """Parse with protobuf and fill TF Serving's defaults, as our parser does."""
    proto = text_format.Parse(text, BatchingParametersProto())
    values: dict[str, Any] = {}
    for name in (
        "max_batch_size",
        "batch_timeout_micros",
        "max_enqueued_batches",
        "num_batch_threads",
        "max_execution_batch_size",
        "enable_large_batch_splitting",
    ):
        if proto.HasField(name):
            values[name] = getattr(proto, name).value
    values["thread_pool_name"] = (
        proto.thread_pool_name.value if proto.HasField("thread_pool_name") else "batch_threads"
    )
    values["allowed_batch_sizes"] = tuple(proto.allowed_batch_sizes)
    values["pad_variable_length_inputs"] = proto.pad_variable_length_inputs
    return BatchingParameters(**values)


def monitoring_config(text: str) -> MonitoringConfig:
    """Parse with protobuf, converted to our dataclass."""
    proto = text_format.Parse(text, MonitoringConfigProto())
    if not proto.HasField("prometheus_config"):
        return MonitoringConfig()
    prom = proto.prometheus_config
    return MonitoringConfig(prom.enable, prom.path or DEFAULT_METRICS_PATH)
