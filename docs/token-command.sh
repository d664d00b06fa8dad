#!/bin/sh
# A token command for a reference server, for the conformance suite (--token-command) and the SDK
# (INTENT_TOKEN_COMMAND) alike: it mints a token for the resource INTENT_RESOURCE with the scopes
# INTENT_SCOPE (space-separated), speaking for the account INTENT_ACCOUNT. INTENT_SERVER names the
# intent-server binary (on the PATH unless set), INTENT_DATA_DIR its data directory.
set -eu
exec "${INTENT_SERVER:-intent-server}" token --data-dir "${INTENT_DATA_DIR:-intent-data}" \
  --sub "ci-${INTENT_ACCOUNT:-primary}" --scope "$INTENT_SCOPE" --resource "$INTENT_RESOURCE"
