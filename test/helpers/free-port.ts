// A loopback port nothing listens on now, for a server a test starts (pick and start race only
// with other processes): the one npm start picks its embedded servers' ports with.
export { freePort } from '../../cli/local-services/shared.ts';
