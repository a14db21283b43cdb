#!/usr/bin/env bash
# Regenerates docs/lab/ (filled in below).
