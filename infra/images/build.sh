#!/usr/bin/env bash
# Builds one container image per function (<repo>:<function>, what Cloud Run
# and Knative run; terraform/gcp's `image` variable is <repo>) and the sandbox
# provisioner's image (<repo>:sandbox-provisioner, what terraform's
# provisioner.image names), without a base image or a registry: each image is
# a static Go binary at /bootstrap, the CA bundle, /etc/passwd with the
# non-root user 65532 and a /tmp, imported with `docker import` (so it builds
# on machines that cannot pull). The provisioner's image runs as root: it
# talks to the engine's socket.
#
#   infra/images/build.sh [NAME ...]      default: every function and sandbox-provisioner
#
# Environment: IMAGE_REPO (default yuxi), IMAGE_ARCH (default amd64; Cloud
# Run and the t3/e2 provisioner hosts are amd64), IMAGE_PUSH=1 to push after
# building, DOCKER (default docker) and DOCKER_HOST as the docker CLI reads it,
# GO (default go). Prints each image's reference on stdout.
set -euo pipefail
cd "$(dirname "$0")/../.."

repo=${IMAGE_REPO:-yuxi}
arch=${IMAGE_ARCH:-amd64}
docker=${DOCKER:-docker}
go=${GO:-go}
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  for d in functions/*/; do names+=("$(basename "$d")"); done
  names+=(sandbox-provisioner)
fi
ca=""
for f in /etc/ssl/certs/ca-certificates.crt /etc/pki/tls/certs/ca-bundle.crt /etc/ssl/cert.pem; do
  [ -f "$f" ] && { ca=$f; break; }
done
[ -n "$ca" ] || { echo "images: no CA bundle found (install ca-certificates)" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for name in "${names[@]}"; do
  case $name in
    sandbox-provisioner) pkg=./infra/sandbox-provisioner/cmd/sandbox-provisioner; port=8002; user=0:0 ;;
    *)
      [ -d "functions/$name" ] || { echo "images: no function $name (functions/*)" >&2; exit 2; }
      pkg=./functions/$name; port=8080; user=65532:65532 ;;
  esac
  root=$work/$name
  mkdir -p "$root/etc/ssl/certs" "$root/tmp"
  chmod 1777 "$root/tmp"
  CGO_ENABLED=0 GOOS=linux GOARCH=$arch "$go" build -trimpath -ldflags="-s -w" -o "$root/bootstrap" "$pkg"
  cp "$ca" "$root/etc/ssl/certs/ca-certificates.crt"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/tmp:/sbin/nologin\n' >"$root/etc/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\n' >"$root/etc/group"
  ref=$repo:$name
  tar -C "$root" --numeric-owner --owner=0 --group=0 -cf - . |
    "$docker" import --platform "linux/$arch" \
      --change 'ENTRYPOINT ["/bootstrap"]' --change "USER $user" --change 'WORKDIR /tmp' \
      --change "ENV PORT=$port" --change "EXPOSE $port" \
      --change "LABEL org.opencontainers.image.title=yuxi-$name" \
      - "$ref" >/dev/null
  if [ "${IMAGE_PUSH:-}" = 1 ]; then "$docker" push "$ref" >&2; fi
  echo "$ref"
done
