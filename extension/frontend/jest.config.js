// jest, after the JupyterLab 4.6 extension template's jest.config.js (tests in src/__tests__,
// TypeScript through ts-jest with tsconfig.test.json, as @jupyterlab/testutils' jest-config sets
// it up). The modules tested here import nothing from JupyterLab, so neither @jupyterlab/testutils
// nor a DOM environment is needed: they run in Node.
module.exports = {
  automock: false,
  collectCoverageFrom: ['src/**/*.ts', '!src/**/*.d.ts', '!src/**/__tests__/**'],
  coverageReporters: ['text-summary'],
  moduleFileExtensions: ['ts', 'js', 'json'],
  testEnvironment: 'node',
  testPathIgnorePatterns: ['/lib/', '/node_modules/'],
  testRegex: 'src/.*/.*.spec.ts$',
  transform: {
    '^.+\\.ts$': ['ts-jest', { tsconfig: './tsconfig.test.json' }]
  }
};
