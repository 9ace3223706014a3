# chromium: the headless browser that opens results.html in the tests
# (launch's TestHTMLInChromium). Sourced by scripts/services.sh; nothing runs
# in the background.

chromium_up() {
	if command -v chromium >/dev/null 2>&1; then
		return 0
	fi
	if [ "$(id -u)" -eq 0 ]; then
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
	else
		sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
	fi
}

chromium_down() {
	:
}

chromium_env() {
	echo "export SMPATCH_TEST_CHROMIUM=$(command -v chromium || echo /usr/bin/chromium)"
}
