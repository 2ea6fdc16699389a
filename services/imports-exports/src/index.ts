export { importsExportsModule } from './module.js';
