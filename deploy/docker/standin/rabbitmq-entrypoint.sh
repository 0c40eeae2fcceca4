#!/bin/sh
# The official image's default user from its variables, then the node in the foreground (Debian's
# rabbitmq-server switches to the rabbitmq user itself).
set -e
mkdir -p /etc/rabbitmq/conf.d
{
  echo "loopback_users = none"
  [ -n "${RABBITMQ_DEFAULT_USER:-}" ] && echo "default_user = $RABBITMQ_DEFAULT_USER"
  [ -n "${RABBITMQ_DEFAULT_PASS:-}" ] && echo "default_pass = $RABBITMQ_DEFAULT_PASS"
  true
} > /etc/rabbitmq/conf.d/10-defaults.conf
exec rabbitmq-server
