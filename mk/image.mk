# make image / make test-image: shellctl's hardened container image, built
# and tested on this machine without a container engine (docs/deploy.md).
# Both need root. Not part of make test: test-image takes minutes.
_image_default_goal := $(.DEFAULT_GOAL)

IMAGE_OUT ?= bin/image

.PHONY: image image-repro test-image

# The Debian root (debootstrap minbase, cached under /var/tmp) as a base
# layer that stays the same from release to release, the static binaries as
# a small layer above it: bin/image/oci, bin/image/shellctl-image.tar. A
# line as each stage starts.
image: build
	deploy/image/build.sh $(IMAGE_OUT)

# Builds the image again and fails unless it has the same digest; then as a
# next release would, and fails unless the base layer stays the same.
image-repro: build
	deploy/image/check-reproducible.sh

# Runs the image under runc, hardened, and checks it from outside.
test-image: image
	deploy/image/test-image.sh $(IMAGE_OUT)

.DEFAULT_GOAL := $(_image_default_goal)
