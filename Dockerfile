# One slim image per component, each built from the last stage with its COMPONENT:
#   docker build --build-arg COMPONENT=gateway -t tokenpulse-gateway .
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
# (/models, /spool, /state, /data, /links) exist in the image owned by that user, so a new named
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
    && install -d -o 10001 -g 10001 /models /spool /state /data /links

# One component's image: its extra on top of the common set, then the project's wheel.
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
