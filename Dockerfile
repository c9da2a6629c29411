# One image for the project's components (gateway, exporter, model build job).
# It installs the runtime dependencies only (pyproject's `dependencies`, at the versions frozen
# in requirements.lock), never the test and dev extras that requirements.lock also pins.
FROM python:3.11-slim
WORKDIR /app
COPY requirements.lock pyproject.toml ./
RUN python -c "import tomllib; print(*tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies'], sep='\n')" > /tmp/runtime.txt \
    && URLLIB3_NO_OVERRIDE=1 pip install --no-cache-dir --no-binary urllib3-future \
        -r /tmp/runtime.txt -c requirements.lock \
    && rm /tmp/runtime.txt
COPY README.md ./
COPY tokenpulse ./tokenpulse
COPY serving ./serving
COPY exporter ./exporter
COPY log_pipeline ./log_pipeline
COPY monitoring ./monitoring
COPY stack ./stack
RUN pip install --no-cache-dir --no-deps .
ENTRYPOINT ["tokenpulse"]
