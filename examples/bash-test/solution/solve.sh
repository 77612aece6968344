#!/usr/bin/env bash
echo 'Hello, world!' > hello.txt
