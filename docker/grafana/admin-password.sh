#!/bin/sh
# Grafana's entrypoint in compose.yaml, before the image's own (/run.sh, given as arguments):
# the admin password is never "admin". Grafana takes it only when it creates its database, so on
# the first start of a grafana-data volume it is GRAFANA_ADMIN_PASSWORD if set, else a generated
# one, written into the volume (admin-password, readable by Grafana's user only) and read by
# Grafana from there on every start: `docker compose exec grafana cat /var/lib/grafana/admin-password`.
# A volume whose database was made before this script (its admin still "admin") gets the new
# password through Grafana's CLI first; if that fails, Grafana does not start.
set -eu

data=${GF_PATHS_DATA:-/var/lib/grafana}
file=$data/admin-password

if [ ! -s "$file" ]; then
    password=${GRAFANA_ADMIN_PASSWORD:-}
    if [ "$password" = admin ]; then
        echo "GRAFANA_ADMIN_PASSWORD=admin is refused: set another, or none for a generated one" >&2
        exit 1
    fi
    if [ -z "$password" ]; then
        # NOTE: tr ends on SIGPIPE once head has its 32 characters
        password=$(tr -dc 'A-Za-z0-9' </dev/urandom | head -c 32)
    fi
    if [ -e "$data/grafana.db" ]; then
        grafana cli --homepath "${GF_PATHS_HOME:-/usr/share/grafana}" \
            --config "${GF_PATHS_CONFIG:-/etc/grafana/grafana.ini}" \
            --configOverrides "cfg:default.paths.data=$data" \
            admin reset-admin-password "$password" >/dev/null || {
            echo "could not set the admin password of the Grafana database in $data;" \
                "see docs/deployment.md (Grafana)" >&2
            exit 1
        }
    fi
    (umask 077 && printf '%s' "$password" >"$file.new")
    mv "$file.new" "$file"
    echo "Grafana's admin password is in $file" >&2
fi

unset GRAFANA_ADMIN_PASSWORD
export GF_SECURITY_ADMIN_PASSWORD__FILE="$file"
exec "$@"
