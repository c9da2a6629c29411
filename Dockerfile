# One slim image per component, each built from the last stage with its COMPONENT:
#   docker build --build-arg COMPONENT=gateway -t tokenpulse-gateway .
# and one model image per model version, the `modelcar` target (below).
#
#   COMPONENT runs                                   installs (pyproject, at requirements.lock's pins)
#   model     model build, modelserver               the common dependencies + the `model` extra (TF)
#   gateway   gateway                                the common dependencies + `gateway`
#   exporter  exporter                               the common dependencies + `exporter`
#   shipper   shipper, es setup, samples             the common dependencies + `shipper`
#   oncall    oncall-receiver, alertmanager-check    the common dependencies + `oncall`
#
# Only `model` has TensorFlow. No image installs the test, dev, stack or bench extras, or copies
# devtools/ or tests/ (.dockerignore keeps them out of the context as well). docker-compose.yml
# builds each service's image with its COMPONENT; tests/test_images.py installs each set into a
# venv and sizes it.
#
# Every image runs as the unprivileged user 10001 (group 10001), numeric so that Kubernetes can
# check `runAsNonRoot` (the restricted pod security level). The paths the components write
# (/models, /spool, /state, /data, /links, /training, /training-targets) exist in the image owned
# by that user, so a new named
# volume mounted there starts out writable; the code and its dependencies stay root's, read-only.

# What every stage shares: the interpreter, the pins and the script that prints an extra's set.
FROM python:3.11-slim AS pins
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONUNBUFFERED=1
WORKDIR /app
COPY requirements.lock pyproject.toml ./
COPY scripts/requirements.py ./scripts/

# The project's wheel (code only); each image installs it with --no-deps after its own set.
FROM pins AS wheel
COPY README.md ./
COPY tokenpulse ./tokenpulse
COPY serving ./serving
COPY exporter ./exporter
COPY log_pipeline ./log_pipeline
COPY monitoring ./monitoring
COPY stack ./stack
RUN pip wheel --no-deps --wheel-dir /wheel .

# The common dependencies and the unprivileged user: the layers every image starts from.
FROM pins AS common
RUN python scripts/requirements.py > /tmp/set.txt \
    && pip install -r /tmp/set.txt -c requirements.lock && rm /tmp/set.txt
RUN groupadd --gid 10001 tokenpulse \
    && useradd --uid 10001 --gid 10001 --no-log-init --create-home --shell /usr/sbin/nologin tokenpulse \
    && install -d -o 10001 -g 10001 /models /spool /state /data /links /training /training-targets

# The model artifact (KServe's "modelcar" pattern): one SavedModel version, trained ONCE, when
# this image is built, and carried read-only under /models/gen/<version>; every TF Serving pod
# copies it from here (deploy/k8s/README.md, "Storage"), so every replica serves the same bytes
# and no pod trains. Tag it with the version it carries (a new version is a new tag):
#   docker build --target modelcar --build-arg MODEL_VERSION=2 -t tokenpulse-model-gen:2 .
# model-train is the `model` component image's environment (the same install lines, which
# tests/deploy/test_models.py holds equal), the build the compose stack's model-build runs.
FROM common AS model-train
RUN python scripts/requirements.py model > /tmp/set.txt \
    && pip install -r /tmp/set.txt -c requirements.lock && rm /tmp/set.txt
COPY --from=wheel /wheel /wheel
RUN pip install --no-deps /wheel/*.whl && rm -rf /wheel
USER 10001:10001
ARG MODEL_VERSION=1
ARG MODEL_PRESET=default
ARG MODEL_DEGRADE_NOISE=0.0
RUN tokenpulse model build --preset "$MODEL_PRESET" --base-path /models/gen --version "$MODEL_VERSION" \
      --degrade-noise "$MODEL_DEGRADE_NOISE" --cache-dir /tmp/model-cache --no-progress \
    && rm -rf /tmp/model-cache

# The model image itself: the exported version and a shell to copy it (busybox's sh, cp, mv).
FROM busybox:1.37.0 AS modelcar
COPY --from=model-train --chown=10001:10001 /models/gen /models/gen
USER 10001:10001

# One component's image: its extra on top of the common set, then the project's wheel. The last
# stage, so a build without --target builds it.
FROM common AS component
ARG COMPONENT
RUN case "$COMPONENT" in model|gateway|exporter|shipper|oncall) ;; \
      *) echo "build with --build-arg COMPONENT=model|gateway|exporter|shipper|oncall" >&2; exit 1;; \
    esac \
    && python scripts/requirements.py "$COMPONENT" > /tmp/set.txt \
    && pip install -r /tmp/set.txt -c requirements.lock && rm /tmp/set.txt
COPY --from=wheel /wheel /wheel
RUN pip install --no-deps /wheel/*.whl && rm -rf /wheel
USER 10001:10001
ENTRYPOINT ["tokenpulse"]
