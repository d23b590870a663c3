# make image / make test-image: shellctl's hardened container image, built
# and tested on this machine without a container engine (docs/deploy.md).
# Both need root. Not part of make test: test-image takes minutes.
_image_default_goal := $(.DEFAULT_GOAL)

IMAGE_OUT ?= bin/image

.PHONY: image image-repro test-image

# The Debian root (debootstrap minbase, cached under /var/tmp), the static
# binaries, one reproducible layer: bin/image/oci, bin/image/shellctl-image.tar.
image: build
	deploy/image/build.sh $(IMAGE_OUT)

# Builds the image twice and fails unless both have the same digest.
image-repro: build
	deploy/image/check-reproducible.sh

# Runs the image under runc, hardened, and checks it from outside.
test-image: image
	deploy/image/test-image.sh $(IMAGE_OUT)

.DEFAULT_GOAL := $(_image_default_goal)
