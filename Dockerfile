# One slim image per component: `docker build --target gateway -t tokenpulse-gateway .`
#
#   target    runs                                   installs (pyproject, at requirements.lock's pins)
#   model     model build, modelserver               the common dependencies + the `model` extra (TF)
#   gateway   gateway                                the common dependencies + `gateway`
#   exporter  exporter                               the common dependencies + `exporter`
#   shipper   shipper, es setup, samples             the common dependencies + `shipper`
#   oncall    oncall-receiver, alertmanager-check    the common dependencies + `oncall`
#
# Only `model` has TensorFlow. No target installs the test, dev, stack or bench extras, or copies
# devtools/ or tests/ (.dockerignore keeps them out of the context as well). docker-compose.yml
# builds each service's target; tests/test_images.py installs each set into a venv and sizes it.

# What every stage shares: the interpreter, the pins and the script that prints an extra's set.
FROM python:3.11-slim AS pins
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONUNBUFFERED=1
WORKDIR /app
COPY requirements.lock pyproject.toml ./
COPY scripts/requirements.py ./scripts/

# The project's wheel (code only); each target installs it with --no-deps after its own set.
FROM pins AS wheel
COPY README.md ./
COPY tokenpulse ./tokenpulse
COPY serving ./serving
COPY exporter ./exporter
COPY log_pipeline ./log_pipeline
COPY monitoring ./monitoring
COPY stack ./stack
RUN pip wheel --no-deps --wheel-dir /wheel .

# The common dependencies: the layer every target starts from.
FROM pins AS common
RUN python scripts/requirements.py > /tmp/set.txt \
    && pip install -r /tmp/set.txt -c requirements.lock && rm /tmp/set.txt

FROM common AS model
RUN python scripts/requirements.py model > /tmp/set.txt \
    && pip install -r /tmp/set.txt -c requirements.lock && rm /tmp/set.txt
COPY --from=wheel /wheel /wheel
RUN pip install --no-deps /wheel/*.whl && rm -rf /wheel
ENTRYPOINT ["tokenpulse"]

FROM common AS gateway
RUN python scripts/requirements.py gateway > /tmp/set.txt \
    && pip install -r /tmp/set.txt -c requirements.lock && rm /tmp/set.txt
COPY --from=wheel /wheel /wheel
RUN pip install --no-deps /wheel/*.whl && rm -rf /wheel
ENTRYPOINT ["tokenpulse"]

FROM common AS exporter
RUN python scripts/requirements.py exporter > /tmp/set.txt \
    && pip install -r /tmp/set.txt -c requirements.lock && rm /tmp/set.txt
COPY --from=wheel /wheel /wheel
RUN pip install --no-deps /wheel/*.whl && rm -rf /wheel
ENTRYPOINT ["tokenpulse"]

FROM common AS shipper
RUN python scripts/requirements.py shipper > /tmp/set.txt \
    && pip install -r /tmp/set.txt -c requirements.lock && rm /tmp/set.txt
COPY --from=wheel /wheel /wheel
RUN pip install --no-deps /wheel/*.whl && rm -rf /wheel
ENTRYPOINT ["tokenpulse"]

FROM common AS oncall
RUN python scripts/requirements.py oncall > /tmp/set.txt \
    && pip install -r /tmp/set.txt -c requirements.lock && rm /tmp/set.txt
COPY --from=wheel /wheel /wheel
RUN pip install --no-deps /wheel/*.whl && rm -rf /wheel
ENTRYPOINT ["tokenpulse"]
