// Package jobpeer tells whether a connection to the server was opened by a
// process of a job, so the server can refuse it whatever it sends.
package jobpeer
