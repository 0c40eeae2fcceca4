# Stands in for rabbitmq:3.10-management where Docker Hub cannot be reached (deploy/docker/check.sh
# builds it only then): Debian's rabbitmq-server 3.10 with the management plugin, and the official
# image's RABBITMQ_DEFAULT_USER / RABBITMQ_DEFAULT_PASS.
FROM debian:bookworm-slim
RUN apt-get update -q \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends rabbitmq-server \
 && rm -rf /var/lib/apt/lists/* \
 && rabbitmq-plugins enable --offline rabbitmq_management
COPY deploy/docker/standin/rabbitmq-entrypoint.sh /usr/local/bin/rabbitmq-entrypoint.sh
EXPOSE 5672 15672
ENTRYPOINT ["/bin/sh", "/usr/local/bin/rabbitmq-entrypoint.sh"]
