old gone/run.sh
