"""The project's own Slurm and MariaDB images, built with podman (or docker) from Debian packages.

recipes: what each image holds, its tags and its cache key (pure); engine: the container CLI;
build: base image, package resolution, build or reuse, save.
"""
