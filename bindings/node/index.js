// toolgate for Node.js: the policy engine in-process, as a native addon.
//
// `core.js` holds the typed errors and the object forms of the addon's methods (`Policy`,
// `TurnState`); `adapters/turn.js` holds `Turn`, one user turn of a `TurnState`.
'use strict';

const { compile, load, Policy, TurnState, CompileError, RequestError, TurnError } = require('./core.js');
const { Turn } = require('./adapters/turn.js');

module.exports = { compile, load, Policy, TurnState, CompileError, RequestError, TurnError, Turn };
