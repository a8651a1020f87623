export { Turn, TurnState, TurnError, type TurnOptions } from '../index';
