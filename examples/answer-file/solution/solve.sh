#!/usr/bin/env bash
echo Paris > answer.txt
