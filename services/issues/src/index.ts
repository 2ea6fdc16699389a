export { issuesModule, type IssuesSettings } from './module.js';
