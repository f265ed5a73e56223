// Package launchtest gives a test a launch.Launcher that stops what it
// started when the test ends: the helper every test that starts a
// service as a process shares. It imports testing, so only tests link
// it.
package launchtest
