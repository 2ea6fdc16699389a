export { issuesModule, type IssuesSettings } from './module.js';
export { demoModule, type DemoSettings } from './demo/module.js';
