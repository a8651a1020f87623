export { Turn } from '../index';
