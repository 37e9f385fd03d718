/** The model file names tried, in order, when the config has no default_model_filename (models/backend-choice.ts). */
export const JS_MODEL_FILES = ['model.mjs', 'model.js'] as const;
