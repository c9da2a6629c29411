# One image for the project's components (gateway, exporter, model build job).
FROM python:3.11-slim
WORKDIR /app
COPY requirements.lock pyproject.toml README.md ./
RUN pip install --no-cache-dir -r requirements.lock
COPY tokenpulse ./tokenpulse
COPY serving ./serving
COPY exporter ./exporter
COPY log_pipeline ./log_pipeline
RUN pip install --no-cache-dir --no-deps .
ENV TF_CPP_MIN_LOG_LEVEL=2
ENTRYPOINT ["tokenpulse"]
